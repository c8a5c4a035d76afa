#include "operator/deadletterexport.h"

namespace once {

DeadLetterExport::DeadLetterExport(quint64 token, const QString &path, const DeadLetterFilter &walk, int total)
    : m_token(token), m_walk(walk), m_total(total), m_file(path)
{
    m_walk.afterId.clear();
    m_walk.afterDeadAtMs = 0;
    m_walk.limit = BatchSize;
    // The file has no payload column.
    m_walk.withPayload = false;
}

bool DeadLetterExport::open(QString *error)
{
    return m_file.open(error);
}

DeadLetterExport::Step DeadLetterExport::step(const Fetch &fetch, QString *error)
{
    const auto letters = fetch(m_walk, error);
    if (!letters || !m_file.write(*letters, error)) {
        m_file.cancel();
        return Step::Failed;
    }
    if (letters->size() == BatchSize) {
        m_walk.continueAfter(letters->constLast());
        return Step::More;
    }
    if (!m_file.commit(error))
        return Step::Failed;
    return Step::Done;
}

} // namespace once
