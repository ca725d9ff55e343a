"""The app."""

# functions below
