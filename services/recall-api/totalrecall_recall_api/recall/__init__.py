"""The recall itself: the search service, its stages and what bounds and times them."""
