"""Kubernetes' vocabulary, decoded strictly: typed fields of decoded objects (fields),
quantities (quantity), a container's effective requests (requests) and pod sets out of
pod templates with Kueue's labels and annotations (podsets). Used by the snapshot
readers, the workload kinds' adapters and the live cluster alike; imports nothing of
theirs, so they never import each other in a circle.
"""
