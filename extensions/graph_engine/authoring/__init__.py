"""Plans as authors write them: JSON and DOT, the schema, the lint, the pictures."""
