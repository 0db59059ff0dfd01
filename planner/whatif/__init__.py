"""Questions around the cycle: the nodes to add or drain (capacity), the
ProvisioningRequests to ask for, and a day-long trace replayed (simulate)."""
