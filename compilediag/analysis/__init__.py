"""Pure functions from parsed trace + worker facts to findings. No torch imports here."""
