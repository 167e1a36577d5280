"""The broker: request processors over the store, and the state it keeps beside it (issue 3, in progress)."""
