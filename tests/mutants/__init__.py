"""Mutation harness: plant realistic bugs in spec/ one at a time and check the tests catch them."""
