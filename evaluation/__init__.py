"""Offline evaluation, tuning and benchmarks: tools that join the model and the decoder."""
