"""JAX's part of the course. Importing any module here imports JAX."""
