"""dpaudit."""
