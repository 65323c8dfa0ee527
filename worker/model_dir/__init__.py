"""The model dir: its layout, its owner, its one writer, and whether a checkpoint fits."""
