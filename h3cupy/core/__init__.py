"""Op-agnostic machinery: targets, run-time compilation, launches, interop and input checks."""
