"""Which plan a user's message starts: phrases (``words``), meaning (``decide``), and the utility model (``second``)."""
