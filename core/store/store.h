#pragma once

#include "store/database.h"
#include "operator/inspector.h"
#include "operator/metrics.h"
#include "operator/operations.h"
#include "store/sqlledger.h"
#include "store/sqlqueue.h"
#include "store/workerregistry.h"

#include <memory>

namespace once {

// One opened store: its connection, the queue and the ledger on it, and the read and
// operator services over both. Open it in the thread that will use it.
class Store final
{
    Q_DISABLE_COPY_MOVE(Store)

public:
    static std::unique_ptr<Store> open(const QString &url, QString *error,
                                       Database::Access access = Database::Access::ReadWrite)
    {
        const auto location = StoreLocation::parse(url, error);
        if (!location)
            return nullptr;
        auto db = Database::open(*location, error, access);
        if (!db)
            return nullptr;
        return std::unique_ptr<Store>(new Store(std::move(db)));
    }

    Database &database() { return *m_db; }
    SqlQueue &queue() { return m_queue; }
    SqlLedger &ledger() { return m_ledger; }
    Inspector &inspector() { return m_inspector; }
    Operations &operations() { return m_operations; }
    Metrics &metrics() { return m_metrics; }
    WorkerRegistry &workers() { return m_workers; }

private:
    explicit Store(std::unique_ptr<Database> db)
        : m_db(std::move(db)), m_queue(*m_db), m_ledger(*m_db), m_inspector(*m_db, m_queue),
          m_operations(*m_db, m_queue, m_ledger), m_metrics(*m_db), m_workers(*m_db)
    {
    }

    std::unique_ptr<Database> m_db;
    SqlQueue m_queue;
    SqlLedger m_ledger;
    Inspector m_inspector;
    Operations m_operations;
    Metrics m_metrics;
    WorkerRegistry m_workers;
};

} // namespace once
