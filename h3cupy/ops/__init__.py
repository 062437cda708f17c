"""One module per operator family: docstring (math, shapes) -> checks -> kernel -> launch."""
