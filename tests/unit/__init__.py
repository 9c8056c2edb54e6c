"""Fast tests of the side-effecting half: the fake API server (loopback) and the fake clock."""
