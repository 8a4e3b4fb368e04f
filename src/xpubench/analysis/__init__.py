"""Every figure derived from loaded results."""
