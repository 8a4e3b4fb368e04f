"""Runs a plan: K worker processes per case, each case's results appended as they come."""
