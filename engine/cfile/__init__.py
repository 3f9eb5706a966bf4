"""Column files (cfiles): encoded pages, bloom filters and the file format around them."""
