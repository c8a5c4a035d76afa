#pragma once

#include "alerting/notifiers/notification.h"

#include <QList>
#include <QLoggingCategory>
#include <QObject>
#include <QTimer>
#include <QUrl>

#include <functional>
#include <memory>

namespace once {

Q_DECLARE_LOGGING_CATEGORY(lcWatch)

// Where `once watch` sends its notifications: one kind per URL scheme, each in a file of
// its own beside this one. A notifier sends one notification at a time (its queue sees to
// that) and never blocks the thread it lives on.
class Notifier : public QObject
{
    Q_OBJECT

public:
    using Done = std::function<void(bool delivered, const QString &error)>;

    explicit Notifier(const QUrl &url, QObject *parent = nullptr);
    // done is called once, later, on this notifier's thread; error is one line without
    // the URL's secrets.
    virtual void send(const Notification &notification, Done done) = 0;
    // scheme://host:port: never a path (a Slack webhook's is its token), a user or a query.
    QString name() const { return m_name; }

private:
    QString m_name;
};

// The notifier a --notify value names: http(s)://... a JSON webhook, slack+https://... a
// Slack-compatible incoming webhook (slack+http:// to loopback only), smtp(s)://[USER:
// PASSWORD@]HOST:PORT?from=ADDRESS&to=ADDRESS a mail. "env:NAME" and "file:PATH" read the
// URL from there, as the partners file reads its secrets. nullptr and a one-line error that
// quotes no secret otherwise.
std::unique_ptr<Notifier> createNotifier(const QString &value, QString *error);

// scheme://host:port of a URL, for logs and errors.
QString notifierName(const QUrl &url);

// One notifier's own queue: its notifications in order, one at a time, a failed one tried
// again after a backoff that doubles (retryBaseMs up to retryCapMs) and logged each time,
// while the other notifiers' queues go on.
class NotifierQueue final : public QObject
{
    Q_OBJECT

public:
    // label: how the logs name it ("notify 2"), beside the notifier's own name.
    NotifierQueue(std::unique_ptr<Notifier> notifier, const QString &label, qint64 retryBaseMs,
                  qint64 retryCapMs, QObject *parent = nullptr);
    ~NotifierQueue() override;

    void enqueue(const Notification &notification);
    // Forgets the waiting notifications keep() refuses (not the one being sent).
    void drop(const std::function<bool(const Notification &)> &keep);
    bool isIdle() const { return m_pending.isEmpty() && !m_sending; }
    QString name() const { return m_name; }
    int failures() const { return m_failures; }

signals:
    // After every try of a notification: sent, or failed (and tried again later).
    void attempted(const Notification &notification, bool sent);

private:
    void sendNext();

    std::unique_ptr<Notifier> m_notifier;
    QString m_name;
    qint64 m_retryBaseMs;
    qint64 m_retryCapMs;
    QList<Notification> m_pending;
    bool m_sending = false;
    int m_failures = 0; // in a row, of the notification at the head
    QTimer m_retry;
};

} // namespace once
