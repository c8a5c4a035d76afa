#pragma once

#include "model/deadletter.h"
#include "operator/deadletterfile.h"

#include <functional>
#include <optional>

namespace once {

// Every dead letter a filter takes, written to a file (DeadLetterFile) a batch at a time
// as its keyset cursor walks them. The console's reader runs one step at a time between
// its other requests, so that however many letters match, it holds one batch, and the
// pages it also answers wait for a batch at most.
class DeadLetterExport final
{
    Q_DISABLE_COPY_MOVE(DeadLetterExport)

public:
    // A page of the walk: the letters the filter takes after its cursor, at most its limit.
    using Fetch = std::function<std::optional<QList<DeadLetter>>(const DeadLetterFilter &page, QString *error)>;
    enum class Step { More, Done, Failed };

    static constexpr int BatchSize = 500;

    // walk: the letters to write, from its start (its cursor and limit are the walk's own).
    // total: how many it counted, for progress; the walk ends where the letters do.
    DeadLetterExport(quint64 token, const QString &path, const DeadLetterFilter &walk, int total);

    quint64 token() const { return m_token; }
    int total() const { return m_total; }
    int written() const { return m_file.written(); }
    QString path() const { return m_file.path(); }

    bool open(QString *error);
    // Writes the next batch. Done: the file is complete under its name. Failed: *error
    // says why, and nothing is left under the name.
    Step step(const Fetch &fetch, QString *error);
    // Whether cancel() was asked for; the file goes when this object does.
    bool isCancelled() const { return m_cancelled; }
    void cancel() { m_cancelled = true; }

private:
    quint64 m_token = 0;
    DeadLetterFilter m_walk;
    int m_total = 0;
    bool m_cancelled = false;
    DeadLetterFile m_file;
};

} // namespace once
