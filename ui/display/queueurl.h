#pragma once

#include <QString>

namespace once::ui {

// A queue URL (amqp://USER:PASSWORD@HOST/VHOST?queue=NAME, redis://:PASSWORD@HOST/DB?stream=NAME)
// usually carries the broker's password. As with store URLs (storeurl.h), the console
// keeps the full URL in memory to open the broker, and everything it shows or saves
// goes through these.

// Whether the text names a broker's queue (amqp:// or redis://).
bool isQueueUrl(const QString &url);
// What a person may see: QueueLocation::displayName(), else the text without a password.
QString queueDisplayName(const QString &url);
// "RabbitMQ", "Redis Streams"; empty for text that names neither.
QString queueBrokerName(const QString &url);
// The queue's name ("reminders"), or empty when the URL does not parse.
QString queueName(const QString &url);
// The queue for a sentence: "RabbitMQ queue reminders", "Redis Streams stream reminders".
QString queuePlace(const QString &url);
// Where the broker keeps the dead letters, for a heading: "RabbitMQ queue reminders.dead",
// "Redis Streams stream reminders:dead" (QueueLocation::deadLetterName()).
QString deadLetterPlace(const QString &url);
// What may be saved (the recent queues): the URL as typed without its password.
QString queueUrlWithoutPassword(const QString &url);
// The URL with this password (a Redis one has no user: redis://:PASSWORD@HOST).
QString queueUrlWithPassword(const QString &url, const QString &password);
// The password the URL carries, if any.
QString queuePassword(const QString &url);
// A saved queue (no password) to reopen: $ONCE_QUEUE when it names the same queue, so the
// password comes from where `once` itself takes it; else the saved URL as it is.
QString queueUrlForReopening(const QString &savedUrl);

} // namespace once::ui
