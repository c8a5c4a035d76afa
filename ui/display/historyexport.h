#pragma once

#include "operator/inspector.h"
#include "text/csvtext.h"

#include <QByteArray>
#include <QString>

namespace once::ui {

// One event's story as a file a support agent can attach to a ticket: JSON (the event and
// its history as `once history --json` words them) or CSV (one line per history row).
enum class HistoryFormat
{
    Json,
    Csv
};

QByteArray historyToJson(const once::EventRow &event, const QList<once::Attempt> &attempts);
QByteArray historyToCsv(const once::EventRow &event, const QList<once::Attempt> &attempts);
// The format a file name asks for (".csv" is CSV, anything else JSON).
HistoryFormat historyFormatFor(const QString &path);
// Writes the whole file or nothing (QSaveFile).
bool writeHistory(const QString &path, HistoryFormat format, const once::EventRow &event,
                  const QList<once::Attempt> &attempts, QString *error);

} // namespace once::ui
