"""The corpus workshop: TTS corpus synthesis, text normalisation and corpus importers.

Nothing here is imported by serving; it needs the `synth` extra and its Debian engines.
"""
