"""The support explorer's read side: search, the decision trail, exports and the audit of revealed contact data."""
