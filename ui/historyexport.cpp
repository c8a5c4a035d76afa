#include "historyexport.h"

#include "eventstory.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QSaveFile>

namespace once::ui {

QByteArray historyToJson(const EventRow &event, const QList<Attempt> &attempts)
{
    QJsonArray history;
    for (const Attempt &attempt : attempts) {
        QJsonObject row = attemptToJson(attempt);
        row.insert(QStringLiteral("summary"), attemptSummary(attempt));
        history.append(row);
    }
    const QJsonObject document{
        {QStringLiteral("event"), event.toJson()},
        {QStringLiteral("verdict"), eventVerdict(event, attempts).text},
        {QStringLiteral("history"), history},
    };
    return QJsonDocument(document).toJson(QJsonDocument::Indented);
}

QString csvField(const QString &text)
{
    // A spreadsheet runs a cell that starts with one of these as a formula, and producers
    // and partners choose these values (a user id, a request id, an error body): an
    // apostrophe in front keeps the cell text, and spreadsheets do not show it.
    static const QString formulaStarts = QStringLiteral("=+-@\t\r");
    const QString value = !text.isEmpty() && formulaStarts.contains(text.front()) ? QLatin1Char('\'') + text : text;
    const bool quote = value.contains(QLatin1Char(',')) || value.contains(QLatin1Char('"'))
                    || value.contains(QLatin1Char('\n')) || value.contains(QLatin1Char('\r'))
                    || value.startsWith(QLatin1Char(' ')) || value.endsWith(QLatin1Char(' '));
    if (!quote)
        return value;
    QString quoted = value;
    quoted.replace(QLatin1Char('"'), QLatin1String("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

QByteArray historyToCsv(const EventRow &event, const QList<Attempt> &attempts)
{
    // Every line names its event, so lines pasted out of the file still say whose they are.
    static const QStringList header{
        QStringLiteral("send_key"), QStringLiteral("event_id"),    QStringLiteral("at"),
        QStringLiteral("step"),     QStringLiteral("outcome"),     QStringLiteral("summary"),
        QStringLiteral("message_id"), QStringLiteral("delivery"),  QStringLiteral("worker"),
        QStringLiteral("http_status"), QStringLiteral("latency_ms"), QStringLiteral("provider_request_id"),
        QStringLiteral("error_class"), QStringLiteral("error"),
    };
    const QString crlf = QStringLiteral("\r\n");
    QString text = header.join(QLatin1Char(',')) + crlf;
    for (const Attempt &a : attempts) {
        const QStringList fields{
            QString::fromLatin1(a.sendKey.isEmpty() ? event.sendKey : a.sendKey),
            a.eventId.isEmpty() ? event.eventId : a.eventId,
            formatTime(a.atMs),
            a.step,
            a.outcome,
            attemptSummary(a),
            a.messageId,
            a.delivery > 0 ? QString::number(a.delivery) : QString(),
            a.workerId,
            a.httpStatus ? QString::number(a.httpStatus) : QString(),
            a.latencyMs >= 0 ? QString::number(a.latencyMs) : QString(),
            a.providerRequestId,
            a.errorClass,
            a.error,
        };
        QStringList quoted;
        quoted.reserve(fields.size());
        for (const QString &field : fields)
            quoted << csvField(field);
        text += quoted.join(QLatin1Char(',')) + crlf;
    }
    return text.toUtf8();
}

HistoryFormat historyFormatFor(const QString &path)
{
    return path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) ? HistoryFormat::Csv : HistoryFormat::Json;
}

bool writeHistory(const QString &path, HistoryFormat format, const EventRow &event, const QList<Attempt> &attempts,
                  QString *error)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        *error = file.errorString();
        return false;
    }
    const QByteArray bytes = format == HistoryFormat::Csv ? historyToCsv(event, attempts) : historyToJson(event, attempts);
    if (file.write(bytes) != bytes.size() || !file.commit()) {
        *error = file.errorString();
        return false;
    }
    return true;
}

} // namespace once::ui
