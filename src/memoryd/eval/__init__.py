"""`memoryd eval`: search quality on a labelled relevance set (`recall_set.yaml`), measured
through real bridges and a throwaway daemon."""
