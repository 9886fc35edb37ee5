"""Training: data loading, augmentation, batch construction and the trainer.

Serving never imports this package; it reads the bundles the trainer exports.
"""
