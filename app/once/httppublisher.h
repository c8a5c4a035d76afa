#pragma once

#include <QByteArray>
#include <QString>
#include <QThread>

#include <functional>
#include <vector>

namespace once::cli {

// The producers of `once bench --via-serve`: keep-alive HTTP/1.1 connections to a
// `once serve`, on a thread of their own, each with one request at a time (no
// pipelining), publishing single messages or publish_batch requests. A raw socket client
// rather than QNetworkAccessManager, whose six connections per host and per-request
// objects would make the producer the bottleneck. Every request is timed from its write
// to its 200, which `once serve` sends only once the messages are committed.
class HttpPublisher final : public QThread
{
public:
    struct Plan
    {
        quint16 port = 0;
        QString queueName;
        qint64 messages = 0;
        int batch = 1;       // 1: POST /v1/queue/publish; more: publish_batch of this many
        int connections = 1;
        int ratePerSecond = 0; // 0: as fast as the connections go
        // The payload of message n (a reminder's JSON text).
        std::function<QByteArray(qint64 n)> payload;
    };

    explicit HttpPublisher(Plan plan);

    // Once the thread has finished.
    qint64 published() const { return m_published; }
    QString error() const { return m_error; }
    // Each request's time from its write to its 200, sorted.
    const std::vector<qint64> &latenciesUs() const { return m_latenciesUs; }
    // From the first request written to the last 200 read.
    qint64 elapsedUs() const { return m_elapsedUs; }
    // How far behind its due time (--rate) the latest request went out: a producer that
    // cannot keep the rate shows here.
    qint64 worstLagUs() const { return m_worstLagUs; }
    double cpuSeconds() const { return m_cpuSeconds; }

protected:
    void run() override;

private:
    QByteArray request(qint64 first, int count) const;

    Plan m_plan;
    qint64 m_published = 0;
    QString m_error;
    std::vector<qint64> m_latenciesUs;
    qint64 m_elapsedUs = 0;
    qint64 m_worstLagUs = 0;
    double m_cpuSeconds = 0;
};

} // namespace once::cli
