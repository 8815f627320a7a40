"""Evidence: the typed values a policy's rules read, computed once from a results directory."""
