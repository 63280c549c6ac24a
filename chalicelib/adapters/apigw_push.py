"""PushSender on API Gateway's management API (PostToConnection), or the local runner's
stand-in for it (local/push_gateway.py): the same call app.websocket_api.send makes."""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import ConnectionGone, TransientError


class ApiGatewayPushSender:
    def __init__(self, client):
        self._client = client  # apigatewaymanagementapi, its endpoint https://<api>/<stage>

    def send(self, connection_id: str, message: str) -> None:
        try:
            self._client.post_to_connection(ConnectionId=connection_id, Data=message.encode())
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "GoneException":
                raise ConnectionGone(connection_id) from None
            raise TransientError("push gateway refused") from error
        except BotoCoreError as error:
            raise TransientError("push gateway unavailable") from error
