"""The API's edge: auth, request bodies, problem details, JSON views and response builders.
Never imported by the worker, the sweeper or the webhook deliveries."""
