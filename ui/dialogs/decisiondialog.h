#pragma once

#include <QDialog>

class QLabel;
class QLineEdit;
class QPushButton;

namespace once::ui {

// The confirmation of an operator decision that cannot be undone (discard dead letters,
// resolve events in doubt): what it does and risks, an optional reason that goes to the
// audit log and to the history of every event it touches; Enter does neither, Escape cancels.
// Open it with open() (window-modal): the console keeps refreshing behind it.
class DecisionDialog final : public QDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DecisionDialog)

public:
    // confirmText names the button that carries the decision out ("Discard 3").
    DecisionDialog(const QString &title, const QString &text, const QString &informativeText,
                   const QString &confirmText, QWidget *parent = nullptr);
    ~DecisionDialog() override;

    QString text() const;
    QString informativeText() const;
    // What the operator typed, trimmed; empty when nothing.
    QString reason() const;
    QPushButton *confirmButton() const { return m_confirm; }
    QPushButton *cancelButton() const { return m_cancel; }

private:
    QLabel *m_text = nullptr;
    QLabel *m_informative = nullptr;
    QLineEdit *m_reason = nullptr;
    QPushButton *m_confirm = nullptr;
    QPushButton *m_cancel = nullptr;
};

// The reason box of a decision, the same in every dialog that takes one (the redrive
// preview too): one line, at most MaxReasonLength characters, named "reason".
QLineEdit *newReasonEdit(QWidget *parent = nullptr);

} // namespace once::ui
