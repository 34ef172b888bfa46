"""`memoryd eval`: search quality on labelled sets, through real bridges and a throwaway daemon."""
