"""What the model and the person read: the workflow text and the card."""
