"""Staff pages for campaigns: the segment pages (``/campaigns/segments/``)."""
