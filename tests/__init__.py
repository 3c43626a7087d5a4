"""The book's test suite and the maintainer tools it shares with `make refresh`."""
