"""``console``: a read-only web console over the tools' own reads and decisions.

``snapshot`` looks at the cluster (``status``'s rows, the policies, the last actions),
``timeline`` and ``actions`` shape what the page shows (pure), ``server`` serves the page
and its JSON on a loopback address, ``command`` is the click command; the page itself is
``static/`` (one HTML, one script drawing plain SVG, one stylesheet), package data.
"""
