#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

namespace once {

// CSV as once writes it for spreadsheets (an event's history, the dead letters).

// RFC 4180: quoted when it holds a comma, a quote or a line break (or starts or ends with a
// space, which spreadsheets would trim); inner quotes doubled. A value a spreadsheet would
// run as a formula (starting with =, +, -, @, tab or CR) gets an apostrophe in front.
QString csvField(const QString &text);
// One record: the fields quoted as csvField does, joined with commas, ended with CRLF.
QString csvRecord(const QStringList &fields);

// Whether a file name asks for CSV (".csv", any case); an export writes JSON otherwise.
bool isCsvPath(const QString &path);

// Writes the whole file or nothing (QSaveFile); *error says why not.
bool writeWholeFile(const QString &path, const QByteArray &bytes, QString *error);

} // namespace once
