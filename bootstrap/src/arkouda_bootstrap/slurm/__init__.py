"""`server --hosts-from slurm`: the allocation's hosts, the user's own keys, the Service registration."""
