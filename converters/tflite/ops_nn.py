"""placeholder: convolutions, pools and resizes arrive with the layout pass."""
