"""Middle: the iteration space of a kernel (layouts composed with accesses) and its
polyhedral scan into a loop nest; the time limit of the Z3 queries about a nest."""
