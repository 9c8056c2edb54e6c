"""What a replica serves over HTTP: the probes, /metrics and the metrics registry.

The metric definitions, the probe and metrics servers, scrape authorization
(TokenReview + SubjectAccessReview) and the metrics server's reloading certificate.
"""
