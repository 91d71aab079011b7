"""The reconciler (``epochal-reconciler``): continuous log reconciliation of tracked keyspaces —
delivery of missing mutations, fences, low bounds, log collection — shared among reconcilers by
leases. See README.md."""
