"""Provider adapters: one module per provider behind the contract in ``base.py``."""
