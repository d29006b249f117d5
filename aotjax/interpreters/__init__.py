"""One module per interpreter; each owns its rule table."""
