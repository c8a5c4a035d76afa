#include "queues/rabbitmq/rabbitmqmanagement.h"

#include "model/clock.h"
#include "queues/rabbitmq/rabbitmqlocation.h"

#include <QEventLoop>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QThread>

#include <memory>

namespace once {

namespace {

constexpr int ManagementTimeoutMs = 2000;

struct HttpAnswer
{
    int status = 0;
    QNetworkReply::NetworkError error = QNetworkReply::NoError;
    QString errorString;
    QByteArray body;
};

// Runs the request on a thread of its own while this one waits without an event loop: a
// nested loop here would run whatever else is queued for the calling thread (the engine's
// next turn, the console's next request) in the middle of the caller's call.
HttpAnswer getWithoutEventLoop(const QNetworkRequest &request)
{
    HttpAnswer answer;
    const std::unique_ptr<QThread> thread(QThread::create([&request, &answer] {
        QNetworkAccessManager manager;
        const std::unique_ptr<QNetworkReply> reply(manager.get(request));
        if (!reply->isFinished()) {
            QEventLoop loop;
            QObject::connect(reply.get(), &QNetworkReply::finished, &loop, &QEventLoop::quit);
            loop.exec();
        }
        answer.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        answer.error = reply->error();
        answer.errorString = reply->errorString();
        if (reply->error() == QNetworkReply::NoError)
            answer.body = reply->readAll();
    }));
    thread->start();
    thread->wait();
    return answer;
}

} // namespace

QString rabbitMqManagementProblem(const QueueLocation &where, QueueCounts *counts)
{
    const QString base = rabbitMqDetails(where).managementUrl.toString(QUrl::StripTrailingSlash);
    // The default vhost "/" must travel as %2F.
    const QUrl url(QStringLiteral("%1/api/queues/%2/%3")
                       .arg(base, QString::fromLatin1(QUrl::toPercentEncoding(rabbitMqDetails(where).vhost)),
                            QString::fromLatin1(QUrl::toPercentEncoding(where.name))));
    const auto problem = [&base](const QString &reason) {
        return QStringLiteral("RabbitMQ management API not reachable at %1: %2").arg(base, reason);
    };
    QNetworkRequest request(url);
    const QByteArray credentials = where.user.toUtf8() + ':' + where.password.toUtf8();
    request.setRawHeader("Authorization", "Basic " + credentials.toBase64());
    request.setTransferTimeout(ManagementTimeoutMs);
    // The credentials go to this address, never to one it redirects to.
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
    const HttpAnswer answer = getWithoutEventLoop(request);
    if (answer.error == QNetworkReply::OperationCanceledError)
        return problem(QStringLiteral("no answer within %1 s").arg(ManagementTimeoutMs / 1000));
    if (answer.status == 401)
        return problem(QStringLiteral("HTTP 401 (the user needs the monitoring or management tag)"));
    if (answer.status != 200)
        return problem(answer.status ? QStringLiteral("HTTP %1").arg(answer.status) : answer.errorString);
    const QJsonObject queue = QJsonDocument::fromJson(answer.body).object();
    // A queue's statistics appear some seconds after it was declared.
    if (!queue.contains(QLatin1String("messages_unacknowledged")))
        return QStringLiteral("RabbitMQ management API at %1 has no statistics for queue %2 yet")
            .arg(base, where.name);
    counts->inFlight = queue.value(QLatin1String("messages_unacknowledged")).toInteger();
    const qint64 headSeconds = queue.value(QLatin1String("head_message_timestamp")).toInteger(-1);
    if (headSeconds >= 0 && counts->ready > 0)
        counts->oldestReadyAgeMs = std::max<qint64>(nowMs() - headSeconds * 1000, 0);
    return {};
}

} // namespace once
