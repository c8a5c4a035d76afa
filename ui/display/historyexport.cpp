#include "display/historyexport.h"

#include "display/eventstory.h"
#include "text/csvtext.h"

#include <QJsonArray>
#include <QJsonDocument>

namespace once::ui {

QByteArray historyToJson(const EventRow &event, const QList<Attempt> &attempts)
{
    QJsonArray history;
    for (const Attempt &attempt : attempts) {
        QJsonObject row = attemptToJson(attempt);
        row.insert(QStringLiteral("summary"), attemptSummary(attempt));
        history.append(row);
    }
    const Verdict verdict = eventVerdict(event, attempts);
    const QJsonObject document{
        {QStringLiteral("event"), event.toJson()},
        {QStringLiteral("verdict"), verdict.text},
        {QStringLiteral("verdict_kind"), verdictKindName(verdict.kind)},
        {QStringLiteral("customer_text"), verdict.customerText},
        {QStringLiteral("possible_effects"), verdict.possibleEffects},
        {QStringLiteral("history"), history},
    };
    return QJsonDocument(document).toJson(QJsonDocument::Indented);
}

QByteArray historyToCsv(const EventRow &event, const QList<Attempt> &attempts)
{
    // Every line names its event, so lines pasted out of the file still say whose they are.
    static const QStringList header{
        QStringLiteral("send_key"),    QStringLiteral("event_id"),   QStringLiteral("at"),
        QStringLiteral("step"),        QStringLiteral("outcome"),    QStringLiteral("summary"),
        QStringLiteral("message_id"),  QStringLiteral("delivery"),   QStringLiteral("worker"),
        QStringLiteral("http_status"), QStringLiteral("latency_ms"), QStringLiteral("provider_request_id"),
        QStringLiteral("error_class"), QStringLiteral("error"),
    };
    QString text = csvRecord(header);
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
        text += csvRecord(fields);
    }
    return text.toUtf8();
}

HistoryFormat historyFormatFor(const QString &path)
{
    return isCsvPath(path) ? HistoryFormat::Csv : HistoryFormat::Json;
}

bool writeHistory(const QString &path, HistoryFormat format, const EventRow &event,
                  const QList<Attempt> &attempts, QString *error)
{
    return writeWholeFile(
        path, format == HistoryFormat::Csv ? historyToCsv(event, attempts) : historyToJson(event, attempts),
        error);
}

} // namespace once::ui
