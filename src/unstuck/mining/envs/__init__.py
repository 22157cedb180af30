"""The shipped mining environments, by name (:data:`ENVIRONMENTS`)."""
