// What the metrics tests share: a free loopback port for a server that cannot be told to
// pick its own and report it (Prometheus), promtool's verdict on an exposition, and one
// sample's value read back from an exposition.
#pragma once

#include "deliveryharness.h"

#include <QByteArray>
#include <QProcess>
#include <QRegularExpression>
#include <QString>
#include <QTcpServer>

#include <optional>

namespace oncetest {

// A port nobody listens on now: the kernel's pick, released at once. Another process
// could take it before the caller does; on a test machine that is rare enough.
inline quint16 freeLoopbackPort()
{
    QTcpServer probe;
    if (!probe.listen(QHostAddress::LocalHost, 0))
        return 0;
    return probe.serverPort();
}

struct PromtoolVerdict
{
    int exitCode = -1;
    QByteArray output; // lint findings and errors; empty when all is well
};

// `promtool check metrics` (Debian's prometheus package) reads the exposition on stdin.
inline PromtoolVerdict checkWithPromtool(const QByteArray &exposition)
{
    QProcess promtool;
    promtool.setProcessChannelMode(QProcess::MergedChannels);
    promtool.start(QStringLiteral("promtool"), {QStringLiteral("check"), QStringLiteral("metrics")});
    PromtoolVerdict verdict;
    if (!promtool.waitForStarted(10000)) {
        verdict.output = "promtool did not start: " + promtool.errorString().toUtf8();
        return verdict;
    }
    promtool.write(exposition);
    promtool.closeWriteChannel();
    promtool.waitForFinished(30000);
    verdict.exitCode = promtool.exitStatus() == QProcess::NormalExit ? promtool.exitCode() : -1;
    verdict.output = promtool.readAll();
    return verdict;
}

struct HttpAnswer
{
    int status = 0; // 0: no answer
    QByteArray body;
};

// GET on 127.0.0.1, running the event loop meanwhile (so that a server in this process
// answers too), until the body announced by Content-Length is in: Qt 6.4's QHttpServer
// keeps the connection open after its answer even when asked to close it.
inline HttpAnswer fetchHttp(quint16 port, const QByteArray &path, int timeoutMs = 10000)
{
    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, port);
    socket.write("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    QByteArray answer;
    HttpAnswer result;
    static const QRegularExpression statusLine(QStringLiteral("^HTTP/1\\.1 (\\d{3}) "));
    static const QRegularExpression length(QStringLiteral("\r\ncontent-length: *(\\d+)\r\n"),
                                           QRegularExpression::CaseInsensitiveOption);
    pumpUntil(
        [&] {
            answer += socket.readAll();
            const qsizetype headEnd = answer.indexOf("\r\n\r\n");
            if (headEnd < 0)
                return socket.state() == QAbstractSocket::UnconnectedState;
            const QString head = QString::fromLatin1(answer.left(headEnd + 2));
            const auto lengthMatch = length.match(head);
            const qsizetype bodyLength = lengthMatch.hasMatch() ? lengthMatch.captured(1).toLongLong() : 0;
            if (answer.size() < headEnd + 4 + bodyLength)
                return socket.state() == QAbstractSocket::UnconnectedState;
            result.status = statusLine.match(head).captured(1).toInt();
            result.body = answer.mid(headEnd + 4, bodyLength);
            return true;
        },
        timeoutMs);
    return result;
}

// The value of the sample written exactly as `sample` (name and labels as rendered), if
// the exposition has it.
inline std::optional<double> sampleValue(const QByteArray &exposition, const QString &sample)
{
    const QRegularExpression line(QLatin1Char('^') + QRegularExpression::escape(sample) + QStringLiteral(" (\\S+)$"),
                                  QRegularExpression::MultilineOption);
    const auto match = line.match(QString::fromUtf8(exposition));
    if (!match.hasMatch())
        return std::nullopt;
    bool ok = false;
    const double value = match.captured(1).toDouble(&ok);
    return ok ? std::optional<double>(value) : std::nullopt;
}

} // namespace oncetest
