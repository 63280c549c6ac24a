#!/bin/sh
# Creates the bucket and its object-created notification for the originals' prefix only,
# published by MinIO to RabbitMQ (target PRIMARY of type amqp). Safe to run again.
set -eu
: "${MINIO_URL:=http://127.0.0.1:9000}" "${MINIO_USER:=minioadmin}" "${MINIO_PASSWORD:=minioadmin}"
: "${IMAGES_BUCKET:=image-jobs}" "${ORIGINALS_PREFIX:=originals/}"

mc alias set local "$MINIO_URL" "$MINIO_USER" "$MINIO_PASSWORD"
mc mb --ignore-existing "local/$IMAGES_BUCKET"
# Renditions are written under another prefix: they must never trigger the worker again.
if ! mc event list "local/$IMAGES_BUCKET" arn:minio:sqs::PRIMARY:amqp | grep -q "$ORIGINALS_PREFIX"; then
  mc event add "local/$IMAGES_BUCKET" arn:minio:sqs::PRIMARY:amqp --event put --prefix "$ORIGINALS_PREFIX"
fi
mc event list "local/$IMAGES_BUCKET"
echo "minio setup done"
